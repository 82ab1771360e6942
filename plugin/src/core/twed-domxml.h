/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-inventory.h"

G_BEGIN_DECLS

/* Parses virDomainGetXMLDesc() output into what the planner needs
 * (vCPUs, pinning, TWED, metadata); no I/O. */
TwedDomain *twed_domain_parse_xml (const char *xml, GError **error);

G_END_DECLS
