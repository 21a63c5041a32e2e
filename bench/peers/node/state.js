// What the Node peers send a new subscriber first: the channel's current state. The bench's tap keeps it in
// Redis under the tap channel's own name (`GET bench:trajectory:17`, bench/load.py), SET before each
// transaction's changes are published. Read once for every subscriber who arrives before the channel's next
// message, and converted once (`convert`) for all of them, as the gateway encodes a snapshot once per position:
// a read started after the last message the peer saw holds everything the channel's room did not bring to a
// subscriber who joined it since. Channels without a kept state read as null.
function channelStates(client, convert) {
  const seen = new Map(); // channel -> messages seen on it
  const reads = new Map(); // channel -> { seen, state: Promise }, the latest read
  return {
    saw(channel) {
      seen.set(channel, (seen.get(channel) || 0) + 1);
    },
    read(channel) {
      const count = seen.get(channel) || 0;
      let known = reads.get(channel);
      if (!known || known.seen !== count) {
        const read = { seen: count };
        read.state = client.get(channel).then(
          (state) => (state === null ? null : convert(state)),
          (err) => {
            if (reads.get(channel) === read) reads.delete(channel); // the next subscriber reads again
            throw err;
          },
        );
        reads.set(channel, (known = read));
      }
      return known.state;
    },
  };
}

module.exports = { channelStates };
