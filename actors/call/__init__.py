"""One call: admission -> route -> attempts -> relay -> recovery, composed, not mixed in."""
