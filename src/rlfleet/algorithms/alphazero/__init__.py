from rlfleet.algorithms.alphazero.alphazero import ALGO_KEYS, DEFAULT_CONFIG, AlphaZeroTrainer
from rlfleet.algorithms.alphazero.alphazero_policy import AlphaZeroPolicy, alphazero_loss
from rlfleet.algorithms.alphazero.game import SearchGame, check_search_hooks
from rlfleet.algorithms.alphazero.mcts import SearchSettings, search
from rlfleet.algorithms.alphazero.ranked_rewards import RankedRewardBuffer
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "AlphaZeroTrainer", "AlphaZeroPolicy", "alphazero_loss", "SearchGame",
           "check_search_hooks", "SearchSettings", "search", "RankedRewardBuffer"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
AlphaZeroConfig = config_class("AlphaZero")
__all__ += ["AlphaZeroConfig"]
