; "Send to > gpen-watch" in Explorer's menu, for the installer (gpen-watch.nsi): a shortcut in this
; user's SendTo folder to send-to.cmd, which runs `gpen-watch submit` on the files chosen.
; gpen-watch.nsi inserts GpenWatchSendToInstall after the program's files and
; GpenWatchSendToUninstall in its uninstaller. tests/test_windows_installer.py checks the shortcut
; and its removal under Wine, and runs send-to.cmd there with Wine's cmd; Explorer itself never ran it.

!macro GpenWatchSendToInstall
  File "${__FILEDIR__}\send-to.cmd"
  CreateShortcut "$SENDTO\gpen-watch.lnk" "$INSTDIR\send-to.cmd" "" \
    "$INSTDIR\_internal\gpen_watch\data\gpen-watch.ico" 0 SW_SHOWNORMAL "" \
    "Restore the faces in these photos with gpen-watch"
!macroend

!macro GpenWatchSendToUninstall
  Delete "$SENDTO\gpen-watch.lnk"
  Delete "$INSTDIR\send-to.cmd"
!macroend
