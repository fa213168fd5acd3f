#!/usr/bin/env node
// A fake agent that, launched by `aileron launch claude`, opens one tunnel through its session's
// proxy to $UPSTREAM, speaks h2 with a receive window of 0 and sends $STREAMS credentialed GETs
// whose small answers it never reads (the fourteenth re-attack grew the daemon by 1.1 GB so).
// After a few seconds it writes to $ATTACK_REPORT how many answers came, and how many came with a
// length (read whole by the proxy) or without (streamed). Driven by crates/aileron/tests/it/launch.rs.
const net = require("net"), tls = require("tls"), http2 = require("http2"), fs = require("fs");
const [host, port] = process.env.UPSTREAM.split(":");
const proxy = new URL(process.env.HTTPS_PROXY);
const streams = Number(process.env.STREAMS);
const report = { answered: 0, whole: 0, streamed: 0, errors: [] };
const finish = () => {
  fs.writeFileSync(process.env.ATTACK_REPORT, JSON.stringify(report));
  process.exit(0);
};
const socket = net.connect(Number(proxy.port), proxy.hostname, () =>
  socket.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`));
let head = "";
socket.on("data", function connected(data) {
  head += data.toString("latin1");
  if (!head.includes("\r\n\r\n")) return;
  socket.removeListener("data", connected);
  if (!head.startsWith("HTTP/1.1 200")) {
    report.errors.push(head.split("\r\n")[0]);
    return finish();
  }
  const ca = fs.readFileSync(process.env.SSL_CERT_FILE);
  const secure = tls.connect({ socket, servername: host, ALPNProtocols: ["h2"], ca });
  secure.on("secureConnect", () => {
    const session = http2.connect(`https://${host}:${port}`, {
      createConnection: () => secure,
      settings: { initialWindowSize: 0 },
    });
    session.on("error", (error) => report.errors.push(String(error)));
    for (let i = 0; i < streams; i++) {
      const request = session.request({ ":path": `/small/${i}`, authorization: `token ${process.env.GH_TOKEN}` });
      request.on("response", (headers) => {
        report.answered++;
        if (headers["content-length"] !== undefined) report.whole++;
        else report.streamed++;
        request.pause();
      });
      request.on("error", () => {});
    }
    setTimeout(finish, 4000);
  });
  secure.on("error", (error) => {
    report.errors.push(String(error));
    finish();
  });
});
socket.on("error", (error) => {
  report.errors.push(String(error));
  finish();
});
