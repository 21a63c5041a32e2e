"""What an operator reads of a node and how it runs: metrics and health, its HTTP figures, the garbage collector's
pauses, the loop's lag, logging, the API documents (schema), workers and leaving."""
