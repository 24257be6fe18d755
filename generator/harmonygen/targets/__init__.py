"""One emitter per target; each turns the IR into `Output`s."""
