/* SPDX-License-Identifier: BSD-3-Clause */
#include "load.h"

double load_bps(uint64_t packets, uint64_t bytes, double seconds, bool l1)
{
	double b = (double)bytes + (l1 ? (double)packets * LOAD_L1_OVERHEAD : 0.0);

	return seconds > 0 ? b * 8 / seconds : 0.0;
}

static double share(uint64_t part, uint64_t whole)
{
	return whole > 0 ? (double)part / (double)whole : 0.0;
}

void load_figures(const struct load_counts *c, struct load_figures *f)
{
	double s = c->seconds > 0 ? c->seconds : 1e-9;

	f->offered_pps = (double)c->offered / s;
	f->accepted_pps = (double)c->accepted / s;
	f->rx_pps = (double)c->received / s;
	f->not_accepted = c->offered > c->accepted ? c->offered - c->accepted : 0;
	f->lost_in_flight = c->lost_in_flight;
	f->not_accepted_fraction = share(f->not_accepted, c->offered);
	f->lost_in_flight_fraction = share(f->lost_in_flight, c->offered);
	f->loss_fraction = share(f->not_accepted + f->lost_in_flight, c->offered);
	f->tx_gbps_l1 = load_bps(c->accepted, c->tx_bytes, s, true) / 1e9;
	f->tx_gbps_l2 = load_bps(c->accepted, c->tx_bytes, s, false) / 1e9;
	f->rx_gbps_l1 = load_bps(c->received, c->rx_bytes, s, true) / 1e9;
	f->rx_gbps_l2 = load_bps(c->received, c->rx_bytes, s, false) / 1e9;
}

const char *load_name(enum load_mode mode)
{
	return mode == LOAD_OPEN ? "open" : "closed";
}
