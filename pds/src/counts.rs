//! Counters per 8-bit code (NACK codes here, SES return codes in the `ses` crate) for `softrdma
//! stat`: a fixed table, no allocation, cheap to copy with the counters that hold it.

/// Distinct codes a [`CodeCounts`] tells apart; more are summed in [`CodeCounts::other`].
pub const CODE_SLOTS: usize = 32;

/// How many times each code was seen, in the order codes were first seen. Exact for up to
/// [`CODE_SLOTS`] distinct codes (the PDS names 28 NACK codes; one process meets a few).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeCounts {
    codes: [u8; CODE_SLOTS],
    counts: [u64; CODE_SLOTS],
    used: u8,
    other: u64,
}

impl Default for CodeCounts {
    fn default() -> CodeCounts {
        CodeCounts { codes: [0; CODE_SLOTS], counts: [0; CODE_SLOTS], used: 0, other: 0 }
    }
}

impl CodeCounts {
    /// Counts one `code`.
    pub fn add(&mut self, code: u8) {
        let used = usize::from(self.used);
        if let Some(i) = self.codes[..used].iter().position(|&c| c == code) {
            self.counts[i] += 1;
        } else if used < CODE_SLOTS {
            self.codes[used] = code;
            self.counts[used] = 1;
            self.used += 1;
        } else {
            self.other += 1;
        }
    }

    /// Times `code` was seen (0 for a code beyond the table's slots: see [`other`](Self::other)).
    pub fn get(&self, code: u8) -> u64 {
        self.iter().find(|&(c, _)| c == code).map_or(0, |(_, n)| n)
    }

    /// Every code seen and its count, in the order first seen.
    pub fn iter(&self) -> impl Iterator<Item = (u8, u64)> + '_ {
        let used = usize::from(self.used);
        self.codes[..used].iter().copied().zip(self.counts[..used].iter().copied())
    }

    /// Codes seen after [`CODE_SLOTS`] distinct ones had taken the table.
    pub fn other(&self) -> u64 {
        self.other
    }

    /// Every code counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_code_apart_in_first_seen_order() {
        let mut c = CodeCounts::default();
        for code in [0x0B, 0x01, 0x0B, 0xFF, 0x0B] {
            c.add(code);
        }
        assert_eq!(c.iter().collect::<Vec<_>>(), [(0x0B, 3), (0x01, 1), (0xFF, 1)]);
        assert_eq!((c.get(0x0B), c.get(0x02), c.total(), c.other()), (3, 0, 5, 0));
    }

    #[test]
    fn codes_beyond_the_slots_are_summed_as_other() {
        let mut c = CodeCounts::default();
        for code in 0..=CODE_SLOTS as u8 + 1 {
            c.add(code);
        }
        c.add(0);
        assert_eq!(c.iter().count(), CODE_SLOTS);
        assert_eq!((c.get(0), c.other(), c.total()), (2, 2, CODE_SLOTS as u64 + 3));
    }
}
