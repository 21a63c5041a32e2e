/**
 * A Node `ws` client with permessage-deflate on, as a Node team would write one, for test_compression.py.
 *
 *   node ws_node_client.js URL TOKEN
 *
 * Prints one JSON line per event: {"open": {"header": <the response's Sec-WebSocket-Extensions>, "extensions":
 * <what ws negotiated>}}, then {"message": <the text received>} for each message, and at the end
 * {"close": <code>, "bytes": <bytes read from the socket>}. Each line on stdin is sent as a text message;
 * the end of stdin closes the connection (1000).
 */
const WebSocket = require("ws");
const readline = require("readline");

const [url, token] = process.argv.slice(2);
const print = (event) => process.stdout.write(JSON.stringify(event) + "\n");

let header = null;
const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${token}` }, perMessageDeflate: true });
ws.on("upgrade", (res) => {
  header = res.headers["sec-websocket-extensions"] || null;
});
ws.on("open", () => {
  print({ open: { header, extensions: ws.extensions } });
  const input = readline.createInterface({ input: process.stdin });
  input.on("line", (line) => ws.send(line));
  input.on("close", () => ws.close(1000));
});
ws.on("message", (data, isBinary) => print({ message: isBinary ? data.toString("base64") : data.toString() }));
ws.on("close", (code) => {
  print({ close: code, bytes: ws._socket ? ws._socket.bytesRead : null });
  process.exit(0);
});
ws.on("error", (err) => {
  print({ error: err.message });
  process.exit(1);
});
