/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-domcaps.h"

#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <string.h>

TwedSupport
twed_domcaps_twed_support (const char *xml, char **reason)
{
  xmlDocPtr doc = NULL;
  xmlXPathContextPtr ctx = NULL;
  xmlXPathObjectPtr obj = NULL;
  TwedSupport support = TWED_SUPPORT_UNKNOWN;
  const char *why = NULL;

  /* No network, no entities: the document comes from a remote host. */
  doc = xmlReadMemory (xml, (int) strlen (xml), "domcaps.xml", NULL,
                       XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (!doc)
    why = "domain capabilities do not parse";
  else if (!(ctx = xmlXPathNewContext (doc)) ||
           !(obj = xmlXPathEvalExpression ((const xmlChar *) "string(/domainCapabilities/features/twed/@supported)", ctx)) ||
           obj->type != XPATH_STRING)
    why = "domain capabilities cannot be read";
  else if (xmlStrEqual (obj->stringval, (const xmlChar *) "yes"))
    support = TWED_SUPPORT_YES;
  else if (xmlStrEqual (obj->stringval, (const xmlChar *) "no"))
    support = TWED_SUPPORT_NO;
  else
    why = "domain capabilities do not mention TWED: not an aarch64 KVM host, or libvirt without TWED support";
  if (reason)
    *reason = g_strdup (why);
  xmlXPathFreeObject (obj);
  xmlXPathFreeContext (ctx);
  xmlFreeDoc (doc);
  return support;
}
