"""The node's own socket layer, on public APIs only: httptools for HTTP/1.1, websockets' sans-I/O
`ServerProtocol` for a websocket's opening handshake, the ASGI app (Starlette) for every plain HTTP request.

- `limits`: what a request may cost before anything sees it, and the refusals that say so;
- `cycle`: one plain HTTP request handed to the ASGI app (its `receive` and `send`);
- `http11`: the asyncio protocol of a connection: parse, bound, dispatch, keep alive;
- `upgrade`: a websocket's opening handshake, answered by the node's own code, then the socket's hand-over to
  gateway.web.websocket.direct's `DirectLink` (the hub sees `hub.connection.Link` only);
- `served`: what one server's connections share; `proxy`: what a trusted proxy says of the client;
- `lifespan`: the ASGI app's startup and shutdown;
- `serve`: the listening sockets, the signals and the node's way of leaving.
"""
