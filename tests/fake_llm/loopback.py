"""What the loopback test servers share: announcing their port to the test
that started them, and exiting with that test (so a crashed test never
leaves a server running)."""
import os
import sys
import threading
import time


def announce(port, port_file=None):
    """Write "PORT PID" to port_file atomically (or to stdout)."""
    line = "%d %d\n" % (port, os.getpid())
    if port_file:
        with open(port_file + ".tmp", "w") as f:
            f.write(line)
        os.rename(port_file + ".tmp", port_file)
    else:
        sys.stdout.write(line)
        sys.stdout.flush()


def alive(pid):
    """False once process pid is gone (True when no pid is watched)."""
    if not pid:
        return True
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def watchdog(pid, idle_exit=None, last_request=None):
    """A daemon thread that ends the process when pid is gone, or after
    idle_exit seconds since last_request[0] (a time.time() value)."""
    def loop():
        while True:
            time.sleep(0.5)
            if not alive(pid):
                os._exit(0)
            if idle_exit is not None and last_request and time.time() - last_request[0] > idle_exit:
                os._exit(0)
    threading.Thread(target=loop, daemon=True).start()
