"""What ends a harness process from inside: a step's memory and time limits
($MK_PALLAS_MEM_MB, $MK_PALLAS_TIME_S: one JSON error, exit 3) and the
end of the engine that started it (exit 70)."""

import json
import os
import time


ENGINE_GONE_EXIT = 70  # exit status of a harness process whose engine went away


def watch_engine(fd=2, period_s=0.5):
    """End this process when the engine that started it is gone: its end of
    our stderr (a pipe or socket only the engine reads; mk-exec keeps no
    copy) closes, which poll() reports as POLLHUP/POLLERR. Covers an engine
    killed with SIGKILL, where nothing else would stop a pre-started worker
    (it would wait out its idle timeout) or a step still running. A no-op
    when fd is a terminal or a file."""
    import select
    import stat
    import threading
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return False

    def loop():
        p = select.poll()
        p.register(fd, select.POLLHUP | select.POLLERR)
        while True:
            for _, ev in p.poll(period_s * 1000):
                if ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    os._exit(ENGINE_GONE_EXIT)
    threading.Thread(target=loop, name="mk-watch-engine", daemon=True).start()
    return True


PHASE = {"now": ""}  # what the step is doing, for the limit messages


def rss_mb():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1048576.0
    except (OSError, ValueError, IndexError):
        return 0.0


def peak_rss_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def start_limits(out, step, mem_mb, time_s):
    """End the step with one clear JSON error (kind memory_limit or
    time_limit, exit 3) when its resident memory passes mem_mb MiB or it runs
    past time_s seconds ($MK_PALLAS_MEM_MB, $MK_PALLAS_TIME_S; 0 = none).
    No RLIMIT_AS: JAX reserves far more address space than it uses. Returns
    an event that stops the watch when set."""
    import threading
    done = threading.Event()  # set when the step ends (a session's next step has its own watch)
    if not mem_mb and not time_s:
        return done
    end = time.monotonic() + time_s if time_s else None

    def watch():
        while not done.wait(0.05):
            used = rss_mb()
            if mem_mb and used > mem_mb:
                kind, why = "memory_limit", "used %.0f MiB, over its limit of %d MiB" % (used, mem_mb)
            elif end and time.monotonic() > end:
                kind, why = "time_limit", "ran past its limit of %g s" % time_s
            else:
                continue
            msg = "harness %s %s%s" % (step, why, " while " + PHASE["now"] if PHASE["now"] else "")
            out.write(json.dumps({"status": "error", "command": step, "error": {"kind": kind, "message": msg},
                                  "peak_rss_mb": max(used, peak_rss_mb())}) + "\n")
            out.flush()
            os._exit(3)
    threading.Thread(target=watch, daemon=True).start()
    return done


def _env_number(name):
    try:
        return float(os.environ.get(name) or 0)
    except ValueError:
        return 0.0


def _cpu_s():
    import resource
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
