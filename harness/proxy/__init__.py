"""The compressing proxy behind `memstrata serve`."""
