// A Foxglove WebSocket client for the tests, built on Foxglove's own client
// library (@foxglove/ws-protocol, with ws), as Foxglove's app speaks to a server:
//
//   NODE_PATH=.venv/foxglove-client/node_modules node foxglove_client.cjs ws://127.0.0.1:PORT
//
// It subscribes to every channel the server advertises and prints one JSON line
// per event on stdout:
//   {"kind": "open"} | {"kind": "channels", "topics": [...], "schemas": {...}}
//   {"kind": "services", "names": [...]}
//   {"kind": "message", "topic": T, "log_time_ns": "N", "data": <the decoded JSON message>}
//   {"kind": "response", "id": I, "ok": true, "data": {...}} | {"kind": "response", "id": I, "ok": false, "error": "..."}
// and takes service calls, one JSON line each, on stdin:
//   {"id": I, "call": "/safemanip/login", "request": {...}}
// It ends when stdin closes or the server goes away.
"use strict";
const { FoxgloveClient } = require("@foxglove/ws-protocol");
const WebSocket = require("ws");
const readline = require("readline");

// The Foxglove SDK's server speaks foxglove.sdk.v1 (the library's constant names the older
// foxglove.websocket.v1, which the SDK no longer accepts); the messages are the same.
const ws = new WebSocket(process.argv[2], ["foxglove.sdk.v1"]);
const client = new FoxgloveClient({ ws });
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const topics = new Map(); // subscription id -> topic
const services = new Map(); // name -> id
const pendingCalls = [];
const decoder = new TextDecoder();
const encoder = new TextEncoder();
const callIds = new Map(); // call id -> request id

client.on("open", () => say({ kind: "open" }));
client.on("error", (e) => say({ kind: "error", error: String(e) }));
client.on("close", () => { say({ kind: "closed" }); process.exit(0); });
client.on("advertise", (channels) => {
  const schemas = {};
  for (const ch of channels) {
    topics.set(client.subscribe(ch.id), ch.topic);
    schemas[ch.topic] = { encoding: ch.encoding, schemaName: ch.schemaName };
  }
  say({ kind: "channels", topics: channels.map((c) => c.topic), schemas });
});
client.on("advertiseServices", (list) => {
  for (const s of list) services.set(s.name, s.id);
  say({ kind: "services", names: list.map((s) => s.name) });
  while (pendingCalls.length) call(pendingCalls.shift());
});
client.on("message", (m) => {
  const text = decoder.decode(new Uint8Array(m.data.buffer, m.data.byteOffset, m.data.byteLength));
  say({ kind: "message", topic: topics.get(m.subscriptionId), log_time_ns: String(m.timestamp), data: JSON.parse(text) });
});
client.on("serviceCallResponse", (r) => {
  const text = decoder.decode(new Uint8Array(r.data.buffer, r.data.byteOffset, r.data.byteLength));
  say({ kind: "response", id: callIds.get(r.callId), ok: true, data: JSON.parse(text) });
});
client.on("serviceCallFailure", (r) => say({ kind: "response", id: callIds.get(r.callId), ok: false, error: r.message }));

let nextCall = 1;
function call(cmd) {
  const serviceId = services.get(cmd.call);
  if (serviceId === undefined) {
    say({ kind: "response", id: cmd.id, ok: false, error: `no service ${cmd.call} advertised` });
    return;
  }
  const callId = nextCall++;
  callIds.set(callId, cmd.id);
  const bytes = encoder.encode(JSON.stringify(cmd.request || {}));
  client.sendServiceCallRequest({ serviceId, callId, encoding: "json", data: new DataView(bytes.buffer) });
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  const cmd = JSON.parse(line);
  if (services.size === 0 && !cmd.now) pendingCalls.push(cmd);
  else call(cmd);
}).on("close", () => { client.close(); setTimeout(() => process.exit(0), 200); });
