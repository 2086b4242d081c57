"""The empty lock file a writer killed while holding a ref leaves behind, of a known age.

majordomus reports a lock's age in whole seconds read from the real clock, so the age
it shows is the age given plus however long the test took to get there: `shown`
accepts exactly that range, never a guess at how fast the machine is.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import time
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class AgedLock:
    path: Path
    age_s: int
    made: float  # time.time() when the lock was given its age

    @classmethod
    def make(cls, path: Path, age_s: int) -> AgedLock:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        made = time.time()
        os.utime(path, (made - age_s, made - age_s))
        return cls(path, age_s, made)

    def shown(self, text: str) -> str:
        """`text` with each age it gives this lock put back to `age_s`, when that age is
        one the clock allows (from `age_s` to `age_s` plus the time since it was made);
        an age outside that range is left as shown, so the comparison fails on it."""
        allowed = range(self.age_s, self.age_s + math.ceil(time.time() - self.made) + 1)

        def settle(match: re.Match[str]) -> str:
            age = int(match.group(1))
            return f"{self.path} is {self.age_s} s old" if age in allowed else match.group(0)

        return re.sub(rf"{re.escape(str(self.path))} is (\d+) s old", settle, text)
