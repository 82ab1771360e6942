/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-json-strict.h"
#include "twed-types.h"

#include <string.h>

/* No valid policy nests deeper or uses bigger numbers; the limits keep
 * the checker's stack and the number conversion bounded. */
#define MAX_DEPTH 64
#define MAX_ABS_NUMBER 1e15

typedef struct {
  const char *p;
  const char *end;
  const char *start;
  GError **error;
} Scanner;

static gboolean value (Scanner *s, guint depth);

static gboolean
fail (Scanner *s, const char *what)
{
  guint line = 1, col = 1;

  for (const char *q = s->start; q < s->p && q < s->end; q++)
    {
      if (*q == '\n')
        {
          line++;
          col = 1;
        }
      else
        col++;
    }
  g_set_error (s->error, TWED_ERROR, TWED_ERROR_INVALID,
               "JSON syntax error at line %u column %u: %s", line, col, what);
  return FALSE;
}

static void
skip_ws (Scanner *s)
{
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

static gboolean
literal (Scanner *s, const char *word)
{
  gsize n = strlen (word);

  if ((gsize) (s->end - s->p) < n || memcmp (s->p, word, n) != 0)
    return fail (s, "unexpected token");
  s->p += n;
  return TRUE;
}

static int
hex4 (Scanner *s)
{
  int v = 0;

  if (s->end - s->p < 4)
    return -1;
  for (int i = 0; i < 4; i++)
    {
      int d = g_ascii_xdigit_value (s->p[i]);

      if (d < 0)
        return -1;
      v = v * 16 + d;
    }
  s->p += 4;
  return v;
}

static gboolean
string (Scanner *s)
{
  s->p++; /* opening quote */
  while (s->p < s->end)
    {
      guchar c = (guchar) *s->p;

      if (c == '"')
        {
          s->p++;
          return TRUE;
        }
      if (c < 0x20)
        return fail (s, "control character in string");
      if (c != '\\')
        {
          s->p++;
          continue;
        }
      s->p++;
      if (s->p >= s->end)
        break;
      switch (*s->p++)
        {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
          break;
        case 'u':
          {
            int u = hex4 (s);

            if (u < 0)
              return fail (s, "bad \\u escape");
            if (u == 0)
              return fail (s, "NUL character in string");
            if (u >= 0xDC00 && u <= 0xDFFF)
              return fail (s, "lone low surrogate in string");
            if (u >= 0xD800 && u <= 0xDBFF)
              {
                int lo;

                if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u')
                  return fail (s, "lone high surrogate in string");
                s->p += 2;
                lo = hex4 (s);
                if (lo < 0xDC00 || lo > 0xDFFF)
                  return fail (s, "lone high surrogate in string");
              }
            break;
          }
        default:
          return fail (s, "bad escape in string");
        }
    }
  return fail (s, "unterminated string");
}

static gboolean
number (Scanner *s)
{
  const char *begin = s->p;
  g_autofree char *copy = NULL;
  double v;

  if (*s->p == '-')
    s->p++;
  if (s->p < s->end && *s->p == '0')
    s->p++;
  else if (s->p < s->end && *s->p >= '1' && *s->p <= '9')
    while (s->p < s->end && g_ascii_isdigit (*s->p))
      s->p++;
  else
    return fail (s, "bad number");
  if (s->p < s->end && *s->p == '.')
    {
      s->p++;
      if (s->p >= s->end || !g_ascii_isdigit (*s->p))
        return fail (s, "bad number");
      while (s->p < s->end && g_ascii_isdigit (*s->p))
        s->p++;
    }
  if (s->p < s->end && (*s->p == 'e' || *s->p == 'E'))
    {
      s->p++;
      if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
        s->p++;
      if (s->p >= s->end || !g_ascii_isdigit (*s->p))
        return fail (s, "bad number");
      while (s->p < s->end && g_ascii_isdigit (*s->p))
        s->p++;
    }
  copy = g_strndup (begin, s->p - begin);
  v = g_ascii_strtod (copy, NULL);
  if (!(v <= MAX_ABS_NUMBER && v >= -MAX_ABS_NUMBER))
    return fail (s, "number out of range");
  return TRUE;
}

static gboolean
container (Scanner *s, guint depth, char close)
{
  gboolean first = TRUE;

  if (depth >= MAX_DEPTH)
    return fail (s, "nesting too deep");
  s->p++;
  skip_ws (s);
  if (s->p < s->end && *s->p == close)
    {
      s->p++;
      return TRUE;
    }
  for (;;)
    {
      if (!first)
        skip_ws (s);
      first = FALSE;
      if (close == '}')
        {
          if (s->p >= s->end || *s->p != '"')
            return fail (s, "expected a member name");
          if (!string (s))
            return FALSE;
          skip_ws (s);
          if (s->p >= s->end || *s->p != ':')
            return fail (s, "expected ':'");
          s->p++;
        }
      if (!value (s, depth + 1))
        return FALSE;
      skip_ws (s);
      if (s->p < s->end && *s->p == ',')
        {
          s->p++;
          skip_ws (s);
          continue;
        }
      if (s->p < s->end && *s->p == close)
        {
          s->p++;
          return TRUE;
        }
      return fail (s, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static gboolean
value (Scanner *s, guint depth)
{
  skip_ws (s);
  if (s->p >= s->end)
    return fail (s, "unexpected end of document");
  switch (*s->p)
    {
    case '{':
      return container (s, depth, '}');
    case '[':
      return container (s, depth, ']');
    case '"':
      return string (s);
    case 't':
      return literal (s, "true");
    case 'f':
      return literal (s, "false");
    case 'n':
      return literal (s, "null");
    default:
      return number (s);
    }
}

gboolean
twed_json_check_strict (const char *data, gsize len, GError **error)
{
  Scanner s = { data, data + len, data, error };

  if (!g_utf8_validate_len (data, len, NULL))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "document is not valid UTF-8");
      return FALSE;
    }
  if (!value (&s, 0))
    return FALSE;
  skip_ws (&s);
  if (s.p != s.end)
    return fail (&s, "trailing data after the document");
  return TRUE;
}
