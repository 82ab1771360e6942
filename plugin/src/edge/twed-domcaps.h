/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-types.h"

G_BEGIN_DECLS

/* TWED support from virConnectGetDomainCapabilities() output:
 * <domainCapabilities><features><twed supported='yes|no'>.  Unknown
 * when the document does not parse or does not mention TWED (not an
 * aarch64 KVM host, or a libvirt without TWED support); @reason then
 * says which. */
TwedSupport twed_domcaps_twed_support (const char *xml, char **reason);

G_END_DECLS
