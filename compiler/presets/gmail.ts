// The gmail preset: one agent mapping on /hooks/gmail fed by `hookgate webhooks gmail run`, which
// posts the Gmail history it fetched as { messages: [{ id, from, subject, snippet, body }] }: one
// isolated agent turn per message (forEach), each under its own session key, all accepted at once.
import type { PresetDefinition } from './preset.js'

export const gmailPreset: PresetDefinition = {
  name: 'gmail',
  description: 'new Gmail messages → an isolated agent turn per message',
  mapping(config) {
    return {
      id: 'preset:gmail',
      match: { path: 'gmail' },
      action: 'agent',
      wakeMode: 'now',
      name: 'Gmail',
      forEach: '{{payload.messages}}',
      sessionKey: 'hook:gmail:{{item.id}}',
      messageTemplate: [
        'New email from {{item.from}}',
        'Subject: {{item.subject}}',
        '{{item.snippet}}',
        '{{item.body}}',
      ].join('\n'),
      // A message body with its headers is larger than the 256 KiB default.
      maxBodyBytes: Math.max(1024 * 1024, (config.hooks.gmail?.maxBytes ?? 0) + 64 * 1024),
    }
  },
}
