"""Between stages: the hand-offs and the typed Run every front opens (handoffs), the one
stage sequencer (sequence)."""
