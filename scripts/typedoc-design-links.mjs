// A TypeDoc plugin (typedoc.json "plugin"): every "DESIGN §N" in the API reference (doc comments, READMEs, the
// design notes themselves) becomes a link to that section of the design notes, which typedoc.json renders as a page
// of the site (projectDocuments: docs/design.md → documents/design.html). "§3.2" links to the heading of section 3,
// "§4b" to 4b's, and "§3c", which has no heading of its own, to section 3's. A section with no heading in docs/design.md is a warning, and the docs build treats warnings as
// errors, so a reference cannot point nowhere.
import { readFileSync } from 'node:fs';
import { MarkdownEvent } from 'typedoc';

const DESIGN_FILE = 'docs/design.md';
const DESIGN_PAGE = 'documents/design.html';
const REFERENCE = /(?<!\[)DESIGN §(\d+[a-z]?)((?:\.\d+)*)/g;

/** The anchor TypeDoc gives a heading: lower case, every run of other characters one dash. */
export function headingSlug(heading) {
  return heading
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

/** Section number ("3", "4b") → the anchor of its "## N. Title" heading in the design notes. */
export function designSections(markdown) {
  const sections = new Map();
  for (const match of markdown.matchAll(/^#{2,3} (\d+[a-z]?)\. (.+)$/gm)) {
    sections.set(match[1], headingSlug(`${match[1]}. ${match[2]}`));
  }
  return sections;
}

/** `markdown` with every DESIGN § reference linked, relative to a page at `pageUrl`. */
export function linkDesignReferences(markdown, pageUrl, sections, warn) {
  const up = '../'.repeat(pageUrl.split('/').length - 1);
  return markdown.replace(REFERENCE, (text, section) => {
    // A lettered part without a heading of its own (§3c) is part of its numbered section (§3).
    const anchor = sections.get(section) ?? sections.get(section.replace(/[a-z]$/, ''));
    if (anchor === undefined) {
      warn(
        `${pageUrl}: "${text}" names no section of ${DESIGN_FILE} (sections: ${[...sections.keys()].join(', ')})`,
      );
      return text;
    }
    return `[${text}](${up}${DESIGN_PAGE}#${anchor})`;
  });
}

/** @param {import('typedoc').Application} app */
export function load(app) {
  const sections = designSections(readFileSync(DESIGN_FILE, 'utf8'));
  const warned = new Set();
  const warn = (message) => {
    if (warned.has(message)) return;
    warned.add(message);
    app.logger.warn(message);
  };
  // Before the Markdown is rendered to HTML (TypeDoc's own listener has priority 0).
  app.renderer.on(
    MarkdownEvent.PARSE,
    (event) => {
      event.parsedText = linkDesignReferences(event.parsedText, event.page.url, sections, warn);
    },
    100,
  );
}
