// The registry of built-in presets; each preset lives in a file of its own, of the shape in preset.ts.
import type { PresetDefinition } from './preset.js'
import { gmailPreset } from './gmail.js'

export type { PresetDefinition }

export const presets: ReadonlyMap<string, PresetDefinition> = new Map([[gmailPreset.name, gmailPreset]])
