// ESLint (flat config, no plugins) for the pages' own scripts, not the vendored library: plain
// ES2017 for browsers, no build step. `.ci/run` runs it.
const browser = Object.fromEntries([
  "window", "document", "navigator", "location", "history", "fetch", "EventSource", "Worker",
  "crypto", "btoa", "atob", "setTimeout", "clearTimeout", "setInterval", "clearInterval",
  "sessionStorage", "Intl", "TextEncoder", "self", "postMessage", "uPlot", "Blob", "URL",
].map((name) => [name, "readonly"]));
export default [
  {
    files: ["*.js"],
    languageOptions: { ecmaVersion: 2017, sourceType: "script", globals: browser },
    rules: {
      "no-undef": "error",
      "no-unused-vars": ["error", { args: "none", caughtErrors: "none" }],
      "no-redeclare": "error",
      "no-dupe-keys": "error",
      "no-unreachable": "error",
      "no-implicit-globals": "error",
      "no-shadow-restricted-names": "error",
      "no-self-assign": "error",
      "no-constant-condition": "error",
      "no-empty": ["error", { allowEmptyCatch: true }],
      "use-isnan": "error",
      "valid-typeof": "error",
      eqeqeq: ["error", "smart"],
    },
  },
  {
    // A Web Worker's script: its global scope is the worker's own.
    files: ["pow.js"],
    rules: { "no-implicit-globals": "off" },
  },
];
