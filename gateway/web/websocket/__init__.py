"""`/ws`: the handshake (opening, the gate, admission), the link the hub writes to (direct), compression, and the
kernel's view of a silent peer."""
