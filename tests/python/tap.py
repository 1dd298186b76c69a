# SPDX-License-Identifier: MIT
"""tap — the harness of the Python tests (tests/python/test_*.py), the
counterpart of tests/t.h: TAP lines, exit 0 / 1 / 77, a scratch folder
removed at every exit, and the mode: with HMM_TEST_DAEMON=unix:PATH
(tests/integration/test_python.sh starts that hmmd) context() opens
shared-mode contexts through it instead of embedded ones on a store in
the scratch folder.  Run with /usr/bin/python3 (Debian's, with torch),
PYTHONPATH=python and HMM_LIB_DIR=build/lib."""
import atexit
import os
import shutil
import sys
import tempfile

_n = 0
_failed = 0


def skip_all(why):
    print("1..0 # SKIP %s" % why)
    sys.exit(77)


try:
    import torch  # noqa: F401
except ImportError:
    skip_all("no torch for %s" % sys.executable)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "python"))
import hmm  # noqa: E402

_dir = tempfile.mkdtemp(prefix="hmm-py.", dir=os.environ.get("HMM_TEST_DIR"))
atexit.register(shutil.rmtree, _dir, True)
DAEMON = os.environ.get("HMM_TEST_DAEMON")


def scratch(name):
    """A fresh path in the scratch folder (removed at exit)."""
    return os.path.join(_dir, name)


_stores = 0


def context(host_budget="64M", store_size="256M", **kw):
    """A context in the test's mode: embedded on a fresh store file, or
    through $HMM_TEST_DAEMON (hmmd's store and budget)."""
    global _stores
    if DAEMON:
        return hmm.Context(daemon=DAEMON, host_budget=host_budget, **kw)
    _stores += 1
    return hmm.Context(store=scratch("store.%d" % _stores),
                       store_size=store_size, host_budget=host_budget, **kw)


def ok(cond, what):
    global _n, _failed
    _n += 1
    if not cond:
        _failed += 1
    print("%sok %d - %s" % ("" if cond else "not ", _n, what), flush=True)
    return cond


def diag(msg):
    print("# " + str(msg).replace("\n", "\n# "), flush=True)


def raises(fn, err, names, what):
    """fn() raises OSError with errno err and a detail containing names."""
    try:
        fn()
    except OSError as e:
        good = e.errno == err and names in str(e)
        ok(good, "%s: OSError(%s) naming '%s'" % (what, err, names))
        if not good:
            diag("got %r" % (e,))
        return
    ok(False, "%s: raised nothing" % what)


def done():
    print("1..%d" % _n)
    sys.exit(1 if _failed else 0)
