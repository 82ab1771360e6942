# SPDX-License-Identifier: GPL-2.0-or-later
"""twed-sweep, the evidence harness (tools/twed-sweep)."""
