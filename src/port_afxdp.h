/* SPDX-License-Identifier: BSD-3-Clause */
/* af_xdp ports: partial checksums from kernel peers completed on receive (port_afxdp.c). */
#ifndef SLUICE_PORT_AFXDP_H
#define SLUICE_PORT_AFXDP_H

#include <stdint.h>

/* Installs the completing receive callback on ETHDEV's queue 0; -1 (logged) if it cannot. */
int port_afxdp_attach(uint16_t ethdev);

#endif
