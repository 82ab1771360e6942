#!/usr/bin/python3
"""Checks that the C policy validator (twedctl policy check) and the JSON
Schema (python3-jsonschema) give the same verdict on every document of
the corpus: valid/ must pass both, invalid/ must fail both. semantic/
holds the documents only the C side can reject (band order, which JSON
Schema cannot express): schema-valid, C-invalid.

The reference reading of a document is strict RFC 8259 JSON, as the C
side enforces: UTF-8 without BOM, no NaN/Infinity, no lone surrogates."""
import json
import os
import subprocess
import sys

import jsonschema


def strict_load(raw):
    def no_constant(name):
        raise ValueError("not JSON: " + name)

    text = raw.decode("utf-8")
    doc = json.loads(text, parse_constant=no_constant)

    def walk(v):
        if isinstance(v, str):
            v.encode("utf-8")  # raises on lone surrogates
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(doc)
    return doc


def schema_verdict(validator, path):
    try:
        with open(path, "rb") as f:
            doc = strict_load(f.read())
    except (ValueError, UnicodeError, RecursionError) as e:
        return False, "not strict JSON: %s" % e
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        return False, "$%s: %s" % ("".join("[%r]" % p for p in e.absolute_path), e.message[:120])
    return True, ""


def c_verdict(twedctl, path):
    p = subprocess.run([twedctl, "policy", "check", path], capture_output=True, text=True)
    if p.returncode not in (0, 2):
        raise SystemExit("twedctl crashed on %s: rc=%d %s" % (path, p.returncode, p.stderr))
    return p.returncode == 0, p.stderr.strip()


def main():
    twedctl, schema_path, corpus = sys.argv[1:4]
    with open(schema_path) as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    expect = {"valid": (True, True), "invalid": (False, False), "semantic": (True, False)}
    failures = 0
    total = 0
    for sub, (want_schema, want_c) in expect.items():
        d = os.path.join(corpus, sub)
        for name in sorted(os.listdir(d)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(d, name)
            total += 1
            s_ok, s_why = schema_verdict(validator, path)
            c_ok, c_why = c_verdict(twedctl, path)
            status = "ok"
            if s_ok != want_schema or c_ok != want_c:
                status = "MISMATCH"
                failures += 1
            print("%-8s %s/%s schema=%s c=%s" % (status, sub, name, s_ok, c_ok))
            if status != "ok" or c_why:
                print("         schema: %s\n         c:      %s" % (s_why or "-", c_why or "-"))
    print("%d documents, %d mismatches" % (total, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
