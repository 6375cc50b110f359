"""One simulator run, as the command line gives it."""

from dataclasses import dataclass, field

from simulator.model import FleetProfile
from simulator.schedule import ramp_rounds

# Registrations a second while the fleet starts, unless --ramp-s says otherwise.
DEFAULT_REGISTRATIONS_PER_S = 200.0


@dataclass(frozen=True)
class RunConfig:
    """One simulator run, as the command line gives it."""

    proxy_url: str = "http://127.0.0.1:8000"
    instances: int = 10
    interval_ms: int = 1000
    token: str | None = None
    duration_s: float | None = None  # report for this long (None: until stopped)
    rounds: int | None = None  # or this many report slots per instance
    seed: int = 0
    id_prefix: str = "sim"
    profile: FleetProfile = field(default_factory=FleetProfile)
    processes: int = 1
    connections: int = 64  # per process
    timeout_s: float = 10.0
    unregister: bool = True
    ramp_s: float | None = None  # start the fleet over this long (None: at DEFAULT_REGISTRATIONS_PER_S)

    def indices(self, process=0):
        """The instances process ``process`` of ``processes`` drives: every processes-th one, interleaved."""
        return range(process, self.instances, self.processes)

    @property
    def ramp_rounds(self):
        ramp_s = self.instances / DEFAULT_REGISTRATIONS_PER_S if self.ramp_s is None else self.ramp_s
        return ramp_rounds(ramp_s, self.interval_ms)
