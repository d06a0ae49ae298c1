// The login form: a token (JWT) or a user name and password (basic).
import { h } from "../ui.js";

export function render({ reason, onLogin }) {
  let mode = "token";
  const token = h("textarea", { id: "login-token", rows: 4, placeholder: "eyJhbGciOi…" });
  const user = h("input", { id: "login-user", autocomplete: "username" });
  const password = h("input", { id: "login-password", type: "password", autocomplete: "current-password" });
  const tokenBox = h("label", { class: "field" }, h("span", {}, "Token"), token);
  const basicBox = h("div", { hidden: true }, h("label", { class: "field" }, h("span", {}, "User"), user),
    h("label", { class: "field" }, h("span", {}, "Password"), password));
  const tabs = h("div", { class: "tabs" },
    h("button", { type: "button", class: "tab active", id: "login-tab-token", onclick: (e) => pick("token", e) }, "Token"),
    h("button", { type: "button", class: "tab", id: "login-tab-basic", onclick: (e) => pick("basic", e) }, "User and password"));
  function pick(which, e) {
    mode = which;
    for (const b of tabs.children) b.classList.toggle("active", b === e.target);
    tokenBox.hidden = which !== "token";
    basicBox.hidden = which !== "basic";
  }
  const form = h("form", { class: "panel login", id: "login-form" },
    h("h2", {}, "Log in to Magnetar"),
    h("p", { class: "notice", id: "login-reason" }, reason),
    tabs, tokenBox, basicBox,
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "login-submit" }, "Log in")));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    onLogin(mode === "token" ? { token: token.value.trim() } : { user: user.value.trim(), password: password.value });
  });
  return form;
}
