import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

type Json = Record<string, unknown>;

/**
 * Validates real responses against the response schemas of an OpenAPI 3.1 document, with ajv's JSON Schema
 * 2020-12 validator in strict mode (so a schema zod emitted that ajv cannot read fails loudly too).
 */
export class ResponseValidator {
  private readonly ajv = new Ajv2020({ strict: true, allErrors: true });
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(private readonly document: Json) {
    addFormats.default(this.ajv);
    const components = (document.components as { schemas: Json }).schemas;
    // OpenAPI refs point into the document; rewrite them into `$defs` of one standalone schema.
    const defs = JSON.parse(
      JSON.stringify(components).replaceAll('"#/components/schemas/', '"#/$defs/'),
    ) as Json;
    this.ajv.addSchema({ $id: 'fenced:components', $defs: defs });
  }

  /** The schema the document gives for `method path` answering `status` with JSON, or null when it has none. */
  schemaFor(method: string, path: string, status: number): string | null {
    const paths = this.document.paths as Record<string, Record<string, { responses: Record<string, Json> }>>;
    let response = paths[path]?.[method.toLowerCase()]?.responses[String(status)];
    if (response === undefined)
      throw new Error(`the document has no ${status} response for ${method} ${path}`);
    if (typeof response.$ref === 'string') {
      const name = response.$ref.replace('#/components/responses/', '');
      response = (this.document.components as { responses: Record<string, Json> }).responses[name]!;
    }
    const schema = (response.content as Record<string, { schema?: { $ref?: string } }> | undefined)?.[
      'application/json'
    ]?.schema?.$ref;
    return schema === undefined ? null : schema.replace('#/components/schemas/', '');
  }

  /** Errors of `body` against the documented response, or [] when it conforms. */
  check(method: string, path: string, status: number, body: unknown): string[] {
    const name = this.schemaFor(method, path, status);
    if (name === null) return [];
    let validate = this.compiled.get(name);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `fenced:components#/$defs/${name}` });
      this.compiled.set(name, validate);
    }
    if (validate(body)) return [];
    return (validate.errors ?? []).map((e) => `${name}${e.instancePath} ${e.message ?? ''}`);
  }
}
