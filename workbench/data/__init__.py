"""Data: loading and splitting (load), slices (slices), tokenised batches (batches), the data's
own token lengths (token_lengths)."""
