"""flagsight Python SDK: fail-safe flag evaluation, outcome feedback and tracked events.

from flagsight_sdk import FlagsightClient

client = FlagsightClient(api_key, "https://flags.example.com")
evaluation = client.evaluate("new-checkout", user_id)
if evaluation:                      # False on any failure: the spec's fail-safe rule
    with client.outcome(evaluation):  # success on exit, failure on an exception
        new_checkout()
client.track("purchase", user_id, value=59.9)  # what the user did, for metrics
"""

from flagsight_sdk.batcher import BatcherStats, FeedbackBatcher, TrackBatcher
from flagsight_sdk.client import FlagsightClient, Outcome
from flagsight_sdk.model import Evaluation
from flagsight_sdk.version import __version__

__all__ = [
    "BatcherStats",
    "Evaluation",
    "FeedbackBatcher",
    "FlagsightClient",
    "Outcome",
    "TrackBatcher",
    "__version__",
]
