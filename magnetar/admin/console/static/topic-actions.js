// A topic's actions, each confirmed in a dialog that says what will happen:
// produce a message, create a subscription, unload, terminate, delete.
import { act, enc } from "./actions.js";
import { parseProperties } from "./ui.js";

const SUBSCRIPTION_NAME = /^[A-Za-z0-9_.:\-]+$/;

// topicPath: "tenant/namespace/topic" (encoded); partitioned: the base name of a partitioned topic.
export function topicActions(name, topicPath, partitioned, done, navigate) {
  const owner = `/console/api/owner/${topicPath}`;
  const admin = `/admin/v2/persistent/${topicPath}`;
  return {
    produce: () => act({
      title: `Produce a message to ${name}`,
      text: partitioned ? "The message goes to the partition its key hashes to (no key: any partition), as a Pulsar client routes it."
        : "One message, stored before the broker answers.",
      fields: [
        { name: "key", label: "Key (optional)", placeholder: "customer-7" },
        { name: "properties", label: "Properties (name=value, comma or line separated)", placeholder: "channel=web, origin=console" },
        { name: "value", label: "Value (text; JSON for a topic with a JSON schema)", type: "textarea", placeholder: '{"order": 1}' }],
      confirm: "Produce",
      validate: (v) => {
        try { parseProperties(v.properties); } catch (e) { return "Properties: " + e.message + "."; }
        return null;
      },
    }, (v) => ({ method: "POST", path: `/console/api/produce/${topicPath}`,
      body: { key: v.key || null, properties: parseProperties(v.properties), value: v.value },
      success: (a) => `Produced to ${a.topic.replace("persistent://", "")} as ${a.messageId} (offset ${a.offset})` }), done),
    subscribe: () => act({
      title: `Create a subscription on ${name}`,
      text: "A durable subscription: the broker keeps every message from its start until it is acknowledged.",
      fields: [
        { name: "subscription", label: "Subscription name", required: true, placeholder: "audit" },
        { name: "start", label: "Starts at", options: [{ value: "latest", label: "the end (new messages only)" },
          { value: "earliest", label: "the earliest stored message" }] }],
      confirm: "Create subscription",
      validate: (v) => SUBSCRIPTION_NAME.test(v.subscription) ? null
        : `“${v.subscription}” is not a subscription name: letters, digits, and _ . : - only.`,
    }, (v) => ({ method: "PUT", path: `${partitioned ? admin : owner}/subscription/${enc(v.subscription)}`, body: v.start,
      success: `Subscription ${v.subscription} created` }), done),
    unload: () => act({
      title: `Unload ${name}`,
      text: "The broker closes the topic; its clients reconnect and it is loaded again on demand. Nothing is lost.",
      confirm: "Unload",
    }, () => ({ method: "PUT", path: `${owner}/unload`, success: `${name} unloaded` }), done),
    terminate: () => act({
      title: `Terminate ${name}`,
      text: "No message can be published to this topic again, ever; consumers read to the end. This cannot be undone.",
      fields: [{ name: "confirmName", label: `Type the topic's name (${name.split("/").pop()}) to confirm`, required: true }],
      confirm: "Terminate", danger: true,
      validate: (v) => v.confirmName === name.split("/").pop() ? null : "The name typed is not the topic's name.",
    }, () => ({ method: "POST", path: `${owner}/terminate`, success: (a) => `${name} terminated at ${a.ledgerId}:${a.entryId}` }), done),
    remove: () => act({
      title: `Delete ${name}`,
      text: (partitioned ? "Every partition is deleted, " : "The topic is deleted ") + "with its subscriptions and stored messages. This cannot be undone.",
      fields: [
        { name: "force", label: "While clients are connected", options: [{ value: "false", label: "refuse (delete only an unused topic)" },
          { value: "true", label: "disconnect them and delete" }] },
        { name: "confirmName", label: `Type the topic's name (${name.split("/").pop()}) to confirm`, required: true }],
      confirm: "Delete", danger: true,
      validate: (v) => v.confirmName === name.split("/").pop() ? null : "The name typed is not the topic's name.",
    }, (v) => ({ method: "DELETE", path: `${admin}${partitioned ? "/partitions" : ""}?force=${v.force}`, success: `${name} deleted` }),
    () => navigate("#/topics")),
  };
}
