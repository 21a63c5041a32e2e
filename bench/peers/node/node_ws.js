/**
 * Plain Node.js `ws` peer: what a Node team writes for "websocket fan-out from Redis".
 *
 * One WebSocketServer on /ws?channels=team:3,trajectory:17, one node-redis connection
 * doing PSUBSCRIBE bench:*, and for each Redis message a loop over that channel's
 * clients calling client.send(payload): the payload is forwarded verbatim as one text
 * frame. A new client first gets each channel's current state, where the tap keeps one
 * (state.js): read and turned into a Buffer once for every client who arrives before the
 * channel's next message.
 *
 * No compression by default. With `--deflate 1`, permessage-deflate as ws ships it
 * (`perMessageDeflate: true`: a compression context kept per connection, each message
 * deflated for each client), except its threshold: ws compresses nothing under 1 KB by
 * default; it is the gateway's (256), so that both compress the same messages.
 *
 *   node bench/peers/node/node_ws.js --port 8102 --redis redis://127.0.0.1:6379 [--deflate 1]
 */
const http = require("http");
const { WebSocketServer, WebSocket } = require("ws");
const { createClient } = require("redis");
const { parseArgs } = require("./args");
const { channelStates } = require("./state");

const { port, redis: redisUrl, deflate } = parseArgs();
const rooms = new Map(); // "bench:team:3" -> Set<WebSocket>
const subscriber = createClient({ url: redisUrl });
const reader = subscriber.duplicate(); // a subscribed connection reads nothing else
const states = channelStates(reader, (state) => Buffer.from(state));

const server = http.createServer((req, res) => res.writeHead(404).end());
const perMessageDeflate = deflate === "1" ? { threshold: 256 } : false;
const wss = new WebSocketServer({ server, path: "/ws", perMessageDeflate });

wss.on("connection", (ws, req) => {
  const query = new URL(req.url, "http://localhost").searchParams;
  const channels = [...new Set((query.get("channels") || "").split(",").filter(Boolean))].map(
    (c) => "bench:" + c,
  );
  for (const ch of channels) {
    if (!rooms.has(ch)) rooms.set(ch, new Set());
    rooms.get(ch).add(ws);
    states.read(ch).then(
      (state) => {
        if (state !== null && ws.readyState === WebSocket.OPEN) ws.send(state, { binary: false });
      },
      (err) => console.error("state:", err.message),
    );
  }
  ws.on("close", () => {
    for (const ch of channels) {
      const room = rooms.get(ch);
      room.delete(ws);
      if (room.size === 0) rooms.delete(ch);
    }
  });
  ws.on("error", () => {}); // a client vanishing mid-write must not crash the process
});

for (const c of [subscriber, reader]) c.on("error", (err) => console.error("redis:", err.message));

async function main() {
  await Promise.all([subscriber.connect(), reader.connect()]);
  await subscriber.pSubscribe("bench:*", (message, channel) => {
    states.saw(channel);
    const room = rooms.get(channel);
    if (!room) return;
    for (const client of room) {
      if (client.readyState === WebSocket.OPEN) client.send(message);
    }
  });
  // The floor's backlog (Node's default is 511): 16,000 subscribers connect at 1,500 a second.
  server.listen(port, "127.0.0.1", 4096, () => console.log(`node_ws listening on 127.0.0.1:${port}`));
}

function shutdown() {
  for (const client of wss.clients) client.terminate();
  wss.close();
  server.close();
  Promise.allSettled([subscriber.quit(), reader.quit()]).then(() => process.exit(0));
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
