// Actions: confirm, call, then say what happened (the broker's reason when refused).
import { call } from "./api.js";
import { confirmDialog, toast } from "./ui.js";

export async function act(dialog, perform, done) {
  const values = await confirmDialog(dialog);
  if (values === null) return false;
  try {
    const { method, path, body, success } = perform(values);
    const answer = await call(method, path, body);
    toast(typeof success === "function" ? success(answer) : success, "ok");
    if (done) await done();
    return true;
  } catch (e) {
    const prefix = e.kind === "down" ? "Not done: the broker did not answer: " : "Refused by the broker: ";
    toast(prefix + (e.reason || e.message), "error");
    return false;
  }
}

export const enc = encodeURIComponent;
