// Reading a server-sent event stream from fetch (a POST, so EventSource cannot be used):
// yields each event's data, joined over its data: lines; comments (": …") are skipped.

export async function* sseData(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
        if (data) yield data;
        end = buffer.indexOf("\n\n");
      }
    }
    buffer += decoder.decode();
    const tail = buffer.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
    if (tail) yield tail;
  } finally {
    reader.releaseLock();
  }
}
