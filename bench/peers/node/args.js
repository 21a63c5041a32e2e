// Shared `--port P --redis URL [--deflate 1]` parsing for the Node peers (kept tiny on purpose).
function parseArgs(argv = process.argv.slice(2)) {
  const opts = { port: 0, redis: "redis://127.0.0.1:6379", deflate: "0" };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "");
    if (!(key in opts) || argv[i + 1] === undefined) {
      console.error(`usage: node ${process.argv[1]} --port PORT [--redis URL]`);
      process.exit(2);
    }
    opts[key] = key === "port" ? Number(argv[i + 1]) : argv[i + 1];
  }
  if (!opts.port) {
    console.error("--port is required");
    process.exit(2);
  }
  return opts;
}

module.exports = { parseArgs };
