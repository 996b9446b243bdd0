"""League self-play: a main policy against its frozen snapshots, matched by PFSP."""
from rlfleet.league.callbacks import LeagueCallbacks
from rlfleet.league.league import League, LeagueSettings
from rlfleet.league.mapping import LeagueMapping

__all__ = ["League", "LeagueCallbacks", "LeagueMapping", "LeagueSettings"]
