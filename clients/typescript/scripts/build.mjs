// Builds the library into dist/: ESM in dist/src (with its .d.ts), CommonJS in dist/cjs (a
// package.json there marks it so). As `prepare` (npm runs it when it installs this folder by
// path or from git, and for npm pack) it first installs the build's own devDependencies from
// package-lock.json when they are missing: npm links a folder without them.
import { execFileSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: "inherit" });

if (!existsSync(tsc)) {
  if (!process.argv.includes("--install")) {
    console.error("typescript is not installed: run npm ci first");
    process.exit(1);
  }
  console.error("@matememory/client: installing the build's devDependencies (npm ci) to build dist/");
  run(process.platform === "win32" ? "npm.cmd" : "npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund"]);
}
run(process.execPath, [tsc, "-p", "tsconfig.json"]);
run(process.execPath, [tsc, "-p", "tsconfig.cjs.json"]);
writeFileSync(join(root, "dist", "cjs", "package.json"), JSON.stringify({ type: "commonjs" }) + "\n");
