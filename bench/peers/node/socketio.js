/**
 * Socket.IO 4.8 peer with @socket.io/redis-adapter: the stock multi-node Node stack.
 *
 * Clients connect to /socket.io/?EIO=4&transport=websocket, emit `join` with a
 * channel name and are put in that room. A dedicated node-redis connection does
 * PSUBSCRIBE bench:*, and each transaction is re-emitted as ONE
 * io.to(channel).emit("job", change) PER CHANGE (each a job's whole state) -- "one
 * emit per job update to a team room" -- then, in a team room, one emit("counts")
 * with the team's counts. The emit goes through the Redis adapter exactly as in a
 * multi-node deployment: delivered to local sockets and published for the other nodes.
 * A socket joining a room first gets socket.emit("state", ...) with the channel's current
 * state, where the tap keeps one (state.js): read and parsed once for every socket that
 * joins before the channel's next message, encoded by Socket.IO for each socket.
 *
 *   node bench/peers/node/socketio.js --port 8103 --redis redis://127.0.0.1:6379
 */
const http = require("http");
const { Server } = require("socket.io");
const { createAdapter } = require("@socket.io/redis-adapter");
const { createClient } = require("redis");
const { parseArgs } = require("./args");
const { channelStates } = require("./state");

const { port, redis: redisUrl } = parseArgs();
const PREFIX = "bench:";

const pubClient = createClient({ url: redisUrl });
const subClient = pubClient.duplicate();
const tapClient = pubClient.duplicate(); // the adapter owns subClient's subscriptions
for (const c of [pubClient, subClient, tapClient]) c.on("error", (err) => console.error("redis:", err.message));
const states = channelStates(pubClient, JSON.parse);

const httpServer = http.createServer();
const io = new Server(httpServer, { perMessageDeflate: false, serveClient: false });

io.on("connection", (socket) => {
  socket.on("join", (channel) => {
    if (typeof channel !== "string") return;
    socket.join(channel);
    states.read(PREFIX + channel).then(
      (state) => {
        if (state !== null && socket.connected) socket.emit("state", state);
      },
      (err) => console.error("state:", err.message),
    );
  });
});

async function main() {
  await Promise.all([pubClient.connect(), subClient.connect(), tapClient.connect()]);
  io.adapter(createAdapter(pubClient, subClient));
  await tapClient.pSubscribe(PREFIX + "*", (message, redisChannel) => {
    states.saw(redisChannel);
    const channel = redisChannel.slice(PREFIX.length);
    const { changes, counts, seq } = JSON.parse(message);
    for (const change of changes) {
      change.channel = channel;
      io.to(channel).emit("job", change);
    }
    if (counts) io.to(channel).emit("counts", { channel, seq: seq || 0, counts });
  });
  httpServer.listen(port, "127.0.0.1", () => console.log(`socketio listening on 127.0.0.1:${port}`));
}

function shutdown() {
  io.close(); // disconnects every socket and closes the HTTP server
  Promise.allSettled([pubClient, subClient, tapClient].map((c) => c.quit())).then(() => process.exit(0));
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
