/**
 * `wheelhouse worker`'s usage, apart from the verb (worker.ts) so that `help`, and every other
 * command, prints it without loading the worker SDK and its HTTP client.
 */
export const WORKER_HELP = `Running tasks (the worker SDK in a process of its own):
  wheelhouse worker --handler <module> [--types <a,b>] [--concurrency <n>] [--worker-id <id>]
                    [--url <url>[,<url>…]] [--token-file <path> | --token <t>]
                    [--transport channel|http]
                    [--stop-grace <seconds>] [--json]
                    the module exports its handlers by task type:
                    export default { 'email.send': async (payload, task) => result, … }
                    (or a named export "handlers"); --types narrows which it runs.
                    The key: --token-file, --token or $WHEELHOUSE_API_KEY (a work key).
                    Tasks come over the worker channel (one WebSocket; several --url
                    nodes to reconnect to), or long-poll with --transport http.
                    One line per task on stderr (--json: JSON lines); Ctrl-C or SIGTERM
                    lets running tasks finish (--stop-grace: then aborts them and reports
                    them failed, to run again), a second one exits at once.
`;
