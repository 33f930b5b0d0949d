// The dashboard's page and style sheet go next to its compiled scripts (dist/src/dashboard/),
// where the node serves them from (src/http/dashboard-routes.ts). tsc writes the scripts; this
// copies what tsc does not.
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const from = join(root, 'src/dashboard');
const to = join(root, 'dist/src/dashboard');
mkdirSync(to, { recursive: true });
for (const file of ['index.html', 'dashboard.css', 'views.css']) copyFileSync(join(from, file), join(to, file));
