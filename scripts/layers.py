#!/usr/bin/env python3
"""Checks the layout rules of ARCHITECTURE.md that a compiler does not.

- No source file over 900 lines (generated files excepted: `GENERATED`).
- No import cycle between the files of a library crate: every `use` and every `crate::`/`super::`/
  `self::`/child-module path in a file is resolved (through `pub use` re-exports) to the file that
  defines the item, and the graph of those file-to-file edges must have no cycle.
- The engine library depends on none of the CLI-only crates (clap, anyhow, serde_json,
  hdrhistogram), by `cargo tree -p engine -e normal`.
- Every workspace member inherits the workspace's lints (`[lints] workspace = true`): the unsafe
  rules (`unsafe_code`, `undocumented_unsafe_blocks`, `missing_safety_doc`) hold in every package.
- Packages below the engine depend on no workspace package but the ones `BELOW` allows, by
  `cargo tree -p PKG -e normal`: the RoCE core (engine/roce) on `wire` and `frame` only, so it
  cannot import the verbs API, the runtime, the datapaths or UET's cores.
- Layer rules between modules: no datapath imports the APIs or the runtime; the real datapaths (udp,
  afxdp) import nothing of the simulator.
- The C ABI packages reach the engine only through its APIs: engine/ibverbs through `engine::verbs`,
  `engine::progress` and the datapath opener (`engine::datapath::link`); engine/libfabric through
  `engine::provider`.

Prints what it finds; exits 1 on any violation. `--graph CRATE_DIR` prints one crate's file edges.
"""

import json
import os
import re
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 900

# Generated files, exempt from the line limit (each names the script that regenerates it).
GENERATED = {
    "engine/ibverbs/src/abi.rs",  # scripts/gen-ibverbs-abi.sh
    "engine/ibverbs/src/cm_abi.rs",  # scripts/gen-rdmacm-abi.sh
    "engine/libfabric/src/abi.rs",  # scripts/gen-libfabric-abi.sh
}

# Dependencies only the tool (engine/cli) may have; `cargo tree -p engine -e normal` must not show them.
CLI_ONLY = ["clap", "anyhow", "serde_json", "hdrhistogram"]

# Library crates (their src/ trees), relative to the root.
LIB_CRATES = ["wire", "nicsim", "pds", "ses", "tss", "engine", "engine/cli", "engine/frame", "engine/roce",
              "engine/ibverbs", "engine/libfabric", "engine/stat"]

# Package -> the workspace packages its normal dependency tree may contain (general-purpose crates
# from crates.io are not limited here). The codecs and buffers sit at the bottom; the RoCE core
# above them only.
BELOW = {
    "wire": set(),
    "frame": set(),
    "roce": {"wire", "frame"},
}

# (files under this prefix, must not reference modules/crates matching this regex, why)
LAYER_RULES = [
    ("engine/src/datapath/", re.compile(r"^crate::(verbs|provider|uet|progress|simpair)\b"),
     "datapaths sit beside the APIs, below nothing of them or of the runtime"),
    ("engine/src/datapath/udp", re.compile(r"^(nicsim\b|crate::datapath::sim\b)"),
     "real datapaths do not depend on the simulator"),
    ("engine/src/datapath/afxdp", re.compile(r"^(nicsim\b|crate::datapath::sim\b)"),
     "real datapaths do not depend on the simulator"),
]

# The C ABI packages reach the engine only through its APIs: (package, the `engine::` paths it may
# name, why). Every Rust file of the package (src/ and tests/) is read, `use` trees and inline paths.
ABI_RULES = [
    ("engine/ibverbs", re.compile(r"^engine::(verbs|progress|datapath::link)(::|$)"),
     "the verbs library reaches the engine through engine::verbs, engine::progress and the datapath "
     "opener (engine::datapath::link)"),
    ("engine/libfabric", re.compile(r"^engine::provider(::|$)"),
     "the libfabric library reaches the engine through engine::provider"),
]

ITEM_RE = re.compile(
    r"\b(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+|const\s+|async\s+|extern\s+\"C\"\s+)*"
    r"(?:struct|enum|union|trait|type|fn|const|static|mod|macro_rules!)\s+(r#)?([A-Za-z_][A-Za-z0-9_]*)"
)


def strip(src):
    """Source with comments, strings and char literals blanked (line structure kept)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 20]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e as f}, self}` -> [[a,b],[a,c,d],[a,c,e],[a]] (renames dropped)."""
    # Renames go while the spaces around `as` still mark them (without spaces, `baseline` read as
    # `b` renamed to `eline`).
    tree = re.sub(r"\s+as\s+[A-Za-z_0-9]+", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def parse(s, prefix):
        paths, depth, start = [], 0, 0
        parts = []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for p in parts:
            if not p:
                continue
            if "{" in p:
                head, rest = p.split("{", 1)
                head = [x for x in head.split("::") if x]
                paths += parse(rest[:-1], prefix + head)
            else:
                segs = [x for x in p.split("::") if x]
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                paths.append(prefix + segs)
        return paths

    return parse(tree, [])


class Crate:
    def __init__(self, rel):
        self.rel = rel
        self.src = os.path.join(ROOT, rel, "src")
        self.files = {}  # module path tuple -> file path
        self._walk((), os.path.join(self.src, "lib.rs"))
        self.text = {m: strip(open(p).read()) for m, p in self.files.items()}
        self.defs = {m: set(g[1] for g in ITEM_RE.findall(t)) for m, t in self.text.items()}
        self.reexports = {m: self._reexports(m) for m in self.files}

    def _walk(self, mod, path):
        """The library's files: lib.rs and every file a `mod NAME;` reaches from it (so the modules
        of the binary, declared from main.rs, are not the library's)."""
        self.files[mod] = path
        base = os.path.dirname(path)
        stem = os.path.basename(path)[:-3]
        if stem not in ("lib", "mod", "main"):
            base = os.path.join(base, stem)
        for m in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_0-9]+)\s*;", strip(open(path).read()), re.M):
            name = m.group(1)
            for child in (os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")):
                if os.path.exists(child):
                    self._walk(mod + (name,), child)
                    break

    def _reexports(self, mod):
        """name -> full module path of what a file's `pub use` brings in."""
        out = {}
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", self.text[mod]):
            tree = m.group(1)
            for path in expand_use(tree):
                if not path:
                    continue
                if path[-1] == "*":
                    out.setdefault("*", []).append(path[:-1])
                    continue
                name = path[-1]
                if " as " in tree:
                    am = re.search(re.escape(path[-1]) + r"\s+as\s+([A-Za-z_0-9]+)", tree)
                    if am:
                        name = am.group(1)
                out[name] = path
        return out

    def absolute(self, mod, path, inline_depth=0):
        """A path as written in module `mod` -> segments from the crate root, or None if external."""
        if not path:
            return None
        head = path[0]
        base = list(mod)
        if head == "crate":
            return path[1:]
        if head in ("self", "super"):
            cur = base + ["<inline>"] * inline_depth
            rest = list(path)
            while rest and rest[0] in ("self", "super"):
                if rest[0] == "super":
                    cur = cur[:-1]
                rest = rest[1:]
            cur = [c for c in cur if c != "<inline>"]
            return cur + rest
        if tuple(base + [head]) in self.files:
            return base + path
        return None

    def resolve(self, segs, seen=None):
        """Absolute segments -> the file (module tuple) that defines the item."""
        seen = seen or set()
        key = tuple(segs)
        if key in seen:
            return None
        seen.add(key)
        k = len(segs)
        while k > 0 and tuple(segs[:k]) not in self.files:
            k -= 1
        mod = tuple(segs[:k])
        if k == len(segs):
            return mod
        name = segs[k]
        if name in self.defs[mod]:
            return mod
        target = self.reexports[mod].get(name)
        if target is not None:
            abs_t = self.absolute(mod, target)
            if abs_t is not None:
                r = self.resolve(abs_t + segs[k + 1:], seen)
                if r is not None:
                    return r
        for glob in self.reexports[mod].get("*", []):
            abs_g = self.absolute(mod, glob)
            if abs_g is not None:
                r = self.resolve(abs_g + [name] + segs[k + 1:], seen)
                if r is not None and r != tuple(abs_g):
                    return r
        return mod

    def references(self, mod):
        """(written path segments, inline depth) for every use-tree leaf and inline path."""
        text = self.text[mod]
        refs = []
        # Track inline `mod name {` blocks so that `super::` inside them resolves right.
        depth_stack, depth = [], 0
        tokens = re.finditer(
            r"\bmod\s+[A-Za-z_0-9]+\s*\{|\{|\}|\buse\s+[^;]+;|\b(?:crate|super|self|[a-z_][a-z0-9_]*)(?:::[A-Za-z_0-9]+)+",
            text,
        )
        children = {m[-1] for m in self.files if len(m) == len(mod) + 1 and m[:len(mod)] == mod}
        for t in tokens:
            s = t.group(0)
            if s.startswith("mod") and s.endswith("{"):
                depth += 1
                depth_stack.append(depth)
            elif s == "{":
                depth += 1
            elif s == "}":
                if depth_stack and depth_stack[-1] == depth:
                    depth_stack.pop()
                depth -= 1
            elif s.startswith("use"):
                for p in expand_use(s[3:-1]):
                    refs.append((p, len(depth_stack)))
            else:
                p = s.split("::")
                if p[0] in ("crate", "super", "self") or p[0] in children:
                    refs.append((p, len(depth_stack)))
        return refs

    def edges(self):
        g = defaultdict(set)
        for mod in self.files:
            for path, inline in self.references(mod):
                segs = self.absolute(mod, path, inline)
                if segs is None:
                    continue
                target = self.resolve(segs)
                if target is not None and target != mod:
                    g[mod].add(target)
        return g


def cycles(graph, nodes):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def rel(crate, mod):
    return os.path.relpath(crate.files[mod], ROOT)


def abi_violations():
    """(file, path, why) for every `engine::` path a C ABI package names outside its API."""
    out = []
    for pkg, allowed, why in ABI_RULES:
        for d, dirs, names in os.walk(os.path.join(ROOT, pkg)):
            dirs[:] = [x for x in dirs if x != "target"]
            for name in sorted(n for n in names if n.endswith(".rs")):
                p = os.path.join(d, name)
                text = strip(open(p).read())
                paths = []
                for u in re.finditer(r"\buse\s+([^;]+);", text):
                    paths += ["::".join(segs) for segs in expand_use(u.group(1))]
                text = re.sub(r"\buse\s+[^;]+;", "", text)
                paths += [m.group(0) for m in re.finditer(r"(?<![A-Za-z0-9_:])engine(?:::[A-Za-z_0-9*]+)+", text)]
                for path in paths:
                    if (path == "engine" or path.startswith("engine::")) and not allowed.search(path):
                        out.append((os.path.relpath(p, ROOT), path, why))
    return out


def lints_not_inherited():
    """Workspace members whose manifest does not say `[lints] workspace = true`."""
    meta = subprocess.run(["cargo", "metadata", "-q", "--no-deps", "--format-version", "1"],
                          cwd=ROOT, capture_output=True, text=True)
    if meta.returncode != 0:
        return [f"cargo metadata failed: {meta.stderr.strip()}"]
    import json
    out = []
    for pkg in json.loads(meta.stdout)["packages"]:
        text = open(pkg["manifest_path"]).read()
        m = re.search(r"^\[lints\]\s*\n(?:[^\[]*\n)*?workspace\s*=\s*true", text, re.M)
        if not m:
            out.append(os.path.relpath(pkg["manifest_path"], ROOT))
    return out


def main():
    bad = 0
    if len(sys.argv) == 3 and sys.argv[1] == "--graph":
        c = Crate(sys.argv[2])
        for a, bs in sorted(c.edges().items()):
            for b in sorted(bs):
                print(f"{rel(c, a)} -> {rel(c, b)}")
        return 0
    # File sizes, every Rust file in the tree.
    for d, dirs, names in os.walk(ROOT):
        rel_d = os.path.relpath(d, ROOT)
        dirs[:] = [x for x in dirs if x not in ("target", ".git") and os.path.join(rel_d, x) not in ("fuzz/corpus", "fuzz/artifacts")]
        for name in names:
            if name.endswith(".rs"):
                p = os.path.join(d, name)
                n = sum(1 for _ in open(p))
                if n > MAX_LINES and os.path.relpath(p, ROOT) not in GENERATED:
                    print(f"layers: {os.path.relpath(p, ROOT)} has {n} lines (limit {MAX_LINES})")
                    bad += 1
    for rel_crate in LIB_CRATES:
        if not os.path.isdir(os.path.join(ROOT, rel_crate, "src")):
            continue
        c = Crate(rel_crate)
        g = c.edges()
        for comp in cycles(g, sorted(c.files)):
            names = sorted(rel(c, m) for m in comp)
            print(f"layers: import cycle in {rel_crate}: " + " <-> ".join(names))
            bad += 1
        for mod in c.files:
            path = rel(c, mod)
            for prefix, forbidden, why in LAYER_RULES:
                if not path.startswith(prefix):
                    continue
                for ref, inline in c.references(mod):
                    segs = c.absolute(mod, ref, inline)
                    written = "::".join(["crate"] + segs) if segs is not None else "::".join(ref)
                    if forbidden.search(written):
                        print(f"layers: {path} uses {written}: {why}")
                        bad += 1
                # External crates named in `use` or inline paths.
                for m in re.finditer(r"\b(nicsim)::", c.text[mod]):
                    if forbidden.search(m.group(1)):
                        print(f"layers: {path} uses {m.group(1)}: {why}")
                        bad += 1
    for path, used, why in abi_violations():
        print(f"layers: {path} uses {used}: {why}")
        bad += 1
    for manifest in lints_not_inherited():
        print(f"layers: {manifest} does not inherit the workspace lints ([lints] workspace = true)")
        bad += 1
    # The engine library needs none of the CLI's dependencies.
    tree = subprocess.run(["cargo", "tree", "-q", "-p", "engine", "-e", "normal", "--prefix", "none"],
                          cwd=ROOT, capture_output=True, text=True)
    if tree.returncode != 0:
        print(f"layers: cargo tree failed: {tree.stderr.strip()}")
        bad += 1
    for dep in CLI_ONLY:
        if any(line.split(" ")[0] == dep for line in tree.stdout.splitlines()):
            print(f"layers: the engine library depends on {dep}, which only the CLI (engine/cli) may use")
            bad += 1
    # The packages at the bottom depend only on the workspace packages below them.
    meta = subprocess.run(["cargo", "metadata", "-q", "--no-deps", "--format-version", "1"],
                          cwd=ROOT, capture_output=True, text=True)
    if meta.returncode != 0:
        print(f"layers: cargo metadata failed: {meta.stderr.strip()}")
        return 1
    workspace = {p["name"] for p in json.loads(meta.stdout)["packages"]}
    for pkg, allowed in sorted(BELOW.items()):
        if pkg not in workspace:
            print(f"layers: BELOW names {pkg}, which is not a workspace package")
            bad += 1
            continue
        t = subprocess.run(["cargo", "tree", "-q", "-p", pkg, "-e", "normal", "--prefix", "none"],
                           cwd=ROOT, capture_output=True, text=True)
        if t.returncode != 0:
            print(f"layers: cargo tree -p {pkg} failed: {t.stderr.strip()}")
            bad += 1
            continue
        deps = {line.split(" ")[0] for line in t.stdout.splitlines() if line.strip()} - {pkg}
        for dep in sorted((deps & workspace) - allowed):
            print(f"layers: package {pkg} depends on {dep}; it may depend on no workspace package but "
                  f"{', '.join(sorted(allowed)) or 'none'}")
            bad += 1
    print("layers: ok" if bad == 0 else f"layers: {bad} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
