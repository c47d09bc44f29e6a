/*
 * Part g: one rdma_cm ID used from three threads at once, as programs with an event thread do.
 * The main thread creates IDs on a shared channel, resolves each to the device's own address and
 * destroys it while the event thread is still handling its ADDR_RESOLVED event (it holds the event
 * a while before it reads event->id->context and acknowledges it); a third thread calls query and
 * option functions on whichever ID is current. rdma_destroy_id must return only once the ID's
 * events are acknowledged (librdmacm's rule: the program may then free the context), calls on a
 * destroyed ID must answer EINVAL, and nothing may crash.
 */
#define _GNU_SOURCE
#include "abi_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC 0x5eed1dULL
#define POISON 0xdeadULL
#define ROUNDS 200

/* What the program hangs on each ID: events handed out and handled, checked by the destroyer. */
struct idctx {
	_Atomic unsigned long long magic;
	atomic_int seen, handled;
};

static struct rdma_event_channel *channel;
static atomic_int stop, bad_context, events, resolved_route;
static _Atomic(struct rdma_cm_id *) current;

static void *event_thread(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		struct pollfd p = {.fd = channel->fd, .events = POLLIN};
		struct rdma_cm_event *ev;
		struct idctx *c;

		if (poll(&p, 1, 10) <= 0)
			continue;
		if (rdma_get_cm_event(channel, &ev))
			continue; /* EAGAIN: another wakeup */
		c = ev->id->context;
		atomic_fetch_add(&c->seen, 1);
		/* The destroyer runs meanwhile; librdmacm's destroy waits for this event's ack. */
		sleep_ms(2);
		if (atomic_load(&c->magic) != MAGIC)
			atomic_fetch_add(&bad_context, 1);
		if (ev->event == RDMA_CM_EVENT_ADDR_RESOLVED && rdma_resolve_route(ev->id, 100) == 0)
			atomic_fetch_add(&resolved_route, 1);
		atomic_fetch_add(&c->handled, 1);
		atomic_fetch_add(&events, 1);
		rdma_ack_cm_event(ev);
	}
	return NULL;
}

static void *query_thread(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		struct rdma_cm_id *id = atomic_load(&current);
		uint8_t tos = 32;

		if (!id)
			continue;
		/* Any answer but a crash: the ID may be destroyed under each call. */
		(void)rdma_get_src_port(id);
		(void)rdma_get_dst_port(id);
		(void)rdma_get_local_addr(id);
		(void)rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1);
		(void)rdma_disconnect(id);
		(void)rdma_notify(id, IBV_EVENT_COMM_EST);
	}
	return NULL;
}

void part_cm_threads(struct dev *d)
{
	const char *local = getenv("SOFTRDMA_LOCAL");
	struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(7471)};
	pthread_t ev_t, q_t;
	int unacked = 0, stale_ok = 0, destroy_failed = 0, resolve_failed = 0, i;

	(void)d;
	if (!local || inet_pton(AF_INET, local, &dst.sin_addr) != 1) {
		fail("g: SOFTRDMA_LOCAL names no IPv4 address (%s)", local ? local : "unset");
		return;
	}
	channel = rdma_create_event_channel();
	if (!check(channel != NULL, "g: rdma_create_event_channel"))
		return;
	fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK);
	pthread_create(&ev_t, NULL, event_thread, NULL);
	pthread_create(&q_t, NULL, query_thread, NULL);
	for (i = 0; i < ROUNDS; i++) {
		struct idctx *c = calloc(1, sizeof(*c));
		struct rdma_cm_id *id = NULL;

		atomic_store(&c->magic, MAGIC);
		if (rdma_create_id(channel, &id, c, RDMA_PS_TCP)) {
			fail("g: rdma_create_id: %s", strerror(errno));
			free(c);
			break;
		}
		atomic_store(&current, id);
		if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 1000))
			resolve_failed++;
		/* Give the event a moment to reach the event thread, sometimes none. */
		if (i % 2)
			sleep_ms(1);
		if (rdma_destroy_id(id))
			destroy_failed++;
		/* Every event it was given is acknowledged now: the context may go. */
		if (atomic_load(&c->seen) != atomic_load(&c->handled))
			unacked++;
		errno = 0;
		if (rdma_resolve_route(id, 100) == -1 && errno == EINVAL)
			stale_ok++;
		atomic_store(&c->magic, POISON);
		free(c);
	}
	atomic_store(&stop, 1);
	pthread_join(ev_t, NULL);
	pthread_join(q_t, NULL);
	atomic_store(&current, NULL);
	check(resolve_failed == 0, "g: rdma_resolve_addr of the device's own address (%d of %d failed)",
	      resolve_failed, ROUNDS);
	check(destroy_failed == 0, "g: rdma_destroy_id returns 0 under concurrent calls (%d failed)", destroy_failed);
	check(unacked == 0, "g: rdma_destroy_id returns after the ID's events are acknowledged (%d did not)",
	      unacked);
	check(atomic_load(&bad_context) == 0,
	      "g: an event's id->context is the live context while it is handled (%d were freed)",
	      atomic_load(&bad_context));
	check(stale_ok == ROUNDS, "g: a destroyed ID answers EINVAL (%d of %d)", stale_ok, ROUNDS);
	check(atomic_load(&events) > 0, "g: the event thread got ADDR_RESOLVED events (%d, %d routes resolved)",
	      atomic_load(&events), atomic_load(&resolved_route));
	rdma_destroy_event_channel(channel);
}
