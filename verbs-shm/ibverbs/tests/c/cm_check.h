/* expect_cm_event(ec, want, id): the C tests' wait for one rdma_cm event, which must be
 * `want` (else the test fails through CHECK); its id into *id when id is not NULL. */
#ifndef IWARP_TEST_CM_CHECK_H
#define IWARP_TEST_CM_CHECK_H

#include <rdma/rdma_cma.h>

#include "check.h"

static inline void expect_cm_event(struct rdma_event_channel *ec, enum rdma_cm_event_type want,
				   struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;
	CHECK(rdma_get_cm_event(ec, &ev) == 0, "get_cm_event");
	CHECK(ev->event == want, "event %s (status %d), expected %s", rdma_event_str(ev->event),
	      ev->status, rdma_event_str(want));
	if (id)
		*id = ev->id;
	CHECK(rdma_ack_cm_event(ev) == 0, "ack");
}

#endif
