"""Python annotations end to end: regions (context manager, decorator, explicit category,
nesting), ranges across threads and steps. Run under LD_PRELOAD by test_e2e.py."""
import argparse
import threading
import time

import traintime


@traintime.region("data_load")
def load() -> None:
    time.sleep(0.001)


def main(steps: int) -> None:
    for _ in range(steps):
        load()
        with traintime.region("forward"):
            with traintime.region("attention"):
                time.sleep(0.001)
        with traintime.region("backward"):
            time.sleep(0.001)
        with traintime.region("allreduce", category="comm"):
            pass
        rid = traintime.range_start("prefetch")
        t = threading.Thread(target=traintime.range_end, args=(rid,))
        t.start()
        t.join()
        traintime.step(samples=8, tokens=1024)
    print("enabled" if traintime.enabled() else "disabled")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", type=int, nargs="?", default=5)
    main(ap.parse_args().steps)
