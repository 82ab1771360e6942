#!/usr/bin/python3
"""Changes twedd made per interval, from its JSON log (--log-format=json).

The log is one stream.  A change made (a line carrying "change") counts
in the interval in which its host's pass was granted: one pass at a time
per host, its grant logged before its changes.  A change without a grant
is counted apart.  Prints: RELOADS UNGRANTED MADE_0 MADE_1 ...

    changes-per-interval.py LOG
"""
import json
import re
import sys

made = [0]
grant_of = {}
ungranted = reloads = 0
with open(sys.argv[1]) as log:
    for line in log:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # not twedd's (a sanitizer's report is checked apart)
        msg = rec.get("message", "")
        if msg.startswith("interval starts"):
            made.append(0)
        elif msg.startswith("SIGHUP"):
            reloads += 1
        elif re.match(r"\d+ change\(s\) granted", msg):
            grant_of[rec["host"]] = len(made) - 1
        elif "change" in rec:
            if rec.get("host") in grant_of:
                made[grant_of[rec["host"]]] += 1
            else:
                ungranted += 1
print(reloads, ungranted, " ".join(map(str, made)))
