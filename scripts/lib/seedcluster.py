"""The running `scripts/seed-cluster.py` cluster's nodes, and `basalt
admin --json` asked of them, for the watchers in scripts/experiments/.

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
    from seedcluster import admin_json, nodes
"""
import glob
import json
import os
import re
import subprocess


def nodes():
    """[(name, cluster address)] of the running cluster's nodes, found by
    their /tmp/seedcluster-*/a*.toml (name: a1, a2, ...)."""
    out = []
    for cfg in sorted(glob.glob("/tmp/seedcluster-*/a*.toml")):
        m = re.search(r'cluster_listen = "([^"]+)"', open(cfg).read())
        if m:
            out.append((os.path.basename(cfg)[:-5], m.group(1)))
    return out


def admin_json(basalt, addr, *command):
    """`basalt admin --node ADDR --json COMMAND...` parsed, or None when the
    node does not answer in 20 s or the answer is not JSON."""
    try:
        r = subprocess.run([basalt, "admin", "--node", addr, "--json", *command],
                           capture_output=True, timeout=20)
        return json.loads(r.stdout)
    except (subprocess.SubprocessError, ValueError):
        return None
