/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-libvirt.h"
#include "twed-types.h"

G_BEGIN_DECLS

/* TRUE when built against a libvirt with virDomainSetTwedParameters. */
gboolean twed_domain_params_available (void);

/* Sets the domain's TWED parameters. @live/@config pick
 * VIR_DOMAIN_AFFECT_LIVE/CONFIG. Nothing changes on error. */
gboolean twed_domain_params_set (virDomainPtr dom, const TwedSetting *s, gboolean live,
                             gboolean config, GError **error);

/* Whether @error of twed_domain_params_set () is the host refusing the
 * values (KVM_ENABLE_CAP's EINVAL, e.g. a delay above kvm-arm.twed_max,
 * which QEMU's set-twed reports as "… failed: Invalid argument",
 * interfaces.md section 2), rather than a failure to get them there. */
gboolean twed_domain_params_refused (const GError *error);

#define TWED_API_MISSING_MESSAGE \
  "applying needs the twed libvirt API (virDomainSetTwedParameters, libvirt built " \
  "with twed's libvirt-patches); this build of twed uses a libvirt without it"

G_END_DECLS
