// A run's events over Server-Sent Events. The browser's EventSource reconnects by itself after a
// drop and sends Last-Event-ID (the seq of the last event it got), so the server resends only
// what was missed. Should the browser give up (the stream closed with an error status), the page
// reopens it with ?last_event_id= itself. Either way an event can arrive twice around a
// reconnect, so whoever renders dedupes by seq (RunView does).

// Every event type tao emits; EventSource only delivers named events to listeners for that name.
export const EVENT_TYPES = ["run_started", "turn_started", "token", "token_delta", "model_retry",
  "thought", "action", "observation", "final_answer", "error", "run_finished",
  "approval_requested", "approval_decided", "plan_created", "step_started", "step_finished",
  "step_retried", "step_failed", "step_skipped", "replanned", "nested", "code", "execution",
  "handed_off", "checklist", "checked"];

export class RunStream {
  constructor(runId, { onEvent, onEnd, onState }) {
    this.runId = runId;
    this.onEvent = onEvent;
    this.onEnd = onEnd || (() => {});
    this.onState = onState || (() => {});
    this.lastSeq = 0;
    this.closed = false;
    this.connects = 0;
    this.open();
  }

  url() {
    const base = `/api/runs/${encodeURIComponent(this.runId)}/events`;
    return this.lastSeq ? `${base}?last_event_id=${this.lastSeq}` : base;
  }

  open() {
    const es = new EventSource(this.url());
    this.source = es;
    this.connects += 1;
    const deliver = (msg) => {
      let data;
      try { data = JSON.parse(msg.data); } catch { return; }
      if (typeof data.seq === "number") this.lastSeq = Math.max(this.lastSeq, data.seq);
      this.onEvent(data);
    };
    for (const name of EVENT_TYPES) es.addEventListener(name, deliver);
    es.onmessage = deliver; // an unnamed message: the type is in its data
    es.addEventListener("end", (msg) => {
      let data = {};
      try { data = JSON.parse(msg.data); } catch { /* an empty end */ }
      this.close();
      this.onEnd(data);
    });
    es.onopen = () => { this.failures = 0; this.onState("open"); };
    es.onerror = () => {
      if (this.closed) return;
      if (es.readyState === EventSource.CLOSED) { // the browser gave up: try again ourselves
        this.failures = (this.failures || 0) + 1;
        if (this.failures > 30) { this.onState("lost"); return; } // the run is gone (404, 401)
        this.onState("reconnecting");
        setTimeout(() => { if (!this.closed) this.open(); }, 1000);
      } else {
        this.onState("reconnecting");
      }
    };
  }

  close() {
    this.closed = true;
    if (this.source) this.source.close();
  }
}
